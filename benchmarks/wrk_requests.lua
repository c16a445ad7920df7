-- wrk script of benchmarks/bench_webhook.py: sends pre-signed requests read from a file, in order, one each.
--   wrk -t1 -cN -dS -s benchmarks/wrk_requests.lua URL -- FILE
-- FILE: one request a line, "<method>\t<path>\t<header name>\t<header value>\t<body>" (the body is compact JSON,
-- so it holds no tab or newline; an empty header name sends none). The requests are formatted once, at start-up,
-- so sending one costs wrk no more than indexing a table. Past the end the file starts again (the benchmark
-- writes more lines than a run can send and checks that it did not wrap). done() prints one JSON line.
local requests = {}
local count = 0
local index = 0

function init(args)
  for line in io.lines(args[1]) do
    local method, path, name, value, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    local headers = {}
    if name ~= "" then headers[name] = value end
    if body ~= "" then headers["Content-Type"] = "application/json" else body = nil end
    count = count + 1
    requests[count] = wrk.format(method, path, headers, body)
  end
end

function request()
  index = index + 1
  if index > count then index = 1 end
  return requests[index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "errors": {"status": %d, "connect": %d, "read": %d, "write": %d, '
      .. '"timeout": %d}, "latency_p50_us": %d, "latency_p99_us": %d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
