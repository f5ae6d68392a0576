-- wrk script: GET one job (GET /api/v1/jobs/1). Token from CRATER_TOKEN.
function init(args)
    token = os.getenv("CRATER_TOKEN")
end

function request()
    return wrk.format("GET", "/api/v1/jobs/1",
                      {["Authorization"] = "Bearer " .. token})
end
