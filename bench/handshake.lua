-- POST {url} as many sidecars: every request carries the next sidecar's token, round-robin.
--
-- Arguments after "--": the file of sidecar tokens (one a line), the version to report and the
-- number of wrk threads. Thread i starts at token floor(i * tokens / threads) and takes the next
-- one on every request, wrapping around: the threads start spread over all the sidecars, and
-- bench/handshake.py replays this from each thread's request() count to know which tokens
-- were sent.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local tokens = {}
local headers = { ["Content-Type"] = "application/json" }
local body = ""
local next_token = 0

-- A global, not a local: done() in report.lua reads it with thread:get().
issued = 0

function init(args)
  for line in io.lines(args[1]) do
    tokens[#tokens + 1] = line
  end
  assert(#tokens > 0, "no sidecar tokens in " .. args[1])
  -- One version for the whole run, so the database shows which run a sidecar was last seen in.
  body = '{"version":"' .. args[2] .. '"}'
  next_token = math.floor(thread_index * #tokens / tonumber(args[3]))
end

function request()
  headers["gateway-sidecar-token"] = tokens[next_token % #tokens + 1]
  next_token = next_token + 1
  issued = issued + 1
  return wrk.format("POST", nil, headers, body)
end
