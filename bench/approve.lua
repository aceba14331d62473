-- PUT {url}/{id} with {"status":"APPROVED"}, approving a different pending review each time.
--
-- Arguments after "--": the file of review ids (one a line), the file holding the bearer token,
-- the first line to use (0-based) and the number of wrk threads. Thread i takes lines
-- first+i, first+i+threads, first+i+2*threads, ... so no two requests share an id.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local BODY = '{"status":"APPROVED"}'

local ids = {}
local headers = {}
local next_line = 0
local stride = 1

-- Globals, not locals: done() in report.lua reads them with thread:get().
issued = 0
exhausted = 0

function init(args)
  for line in io.lines(args[1]) do
    ids[#ids + 1] = line
  end
  local token_file = assert(io.open(args[2]))
  local token = token_file:read("*l")
  token_file:close()
  headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token }
  next_line = tonumber(args[3]) + thread_index
  stride = tonumber(args[4])
end

function request()
  local id = ids[next_line + 1]
  next_line = next_line + stride
  issued = issued + 1
  if id == nil then
    -- Out of ids: ask for a review that does not exist, so the run shows 404s rather than
    -- silently approving a review twice.
    exhausted = exhausted + 1
    id = "out-of-review-ids"
  end
  return wrk.format("PUT", wrk.path .. "/" .. id, headers, BODY)
end
