-- wrk script: durable job submissions (POST /api/v1/jobs), each with a
-- unique name. Token from the CRATER_TOKEN environment variable.
local counter = 0
local thread_id = 0
local threads = {}

function setup(thread)
    thread:set("tid", #threads)
    table.insert(threads, thread)
end

function init(args)
    token = os.getenv("CRATER_TOKEN")
end

function request()
    counter = counter + 1
    local body = string.format(
        '{"name":"wrk-%d-%d","command":["true"],"priority":-100,' ..
        '"resources":{"cpu":"100m","memory":"64Mi"}}', tid, counter)
    return wrk.format("POST", "/api/v1/jobs", {
        ["Authorization"] = "Bearer " .. token,
        ["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
    if status ~= 201 then
        errors = (errors or 0) + 1
    end
end
