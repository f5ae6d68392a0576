-- wrk script: KServe V2 infer requests, one row of 16 FP32 values each
-- (POST .../v2/models/bench/infer). The path comes from the URL given to
-- wrk; wrk counts non-2xx answers, which run.sh reports.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local vals = {}
for i = 1, 16 do vals[i] = string.format("%d.5", i) end
wrk.body = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[' ..
    table.concat(vals, ",") .. ']}]}'
