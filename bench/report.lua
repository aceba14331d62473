-- wrk hooks shared by every benchmark run: number the threads, then report one JSON line.
-- bench/reviews.py and bench/handshake.py read the line starting with BENCH_RESULT; wrk's own
-- text report stays above.

local threads = {}

function setup(thread)
  -- Set before the thread's init() runs, so approve.lua can give each thread its own ids.
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  -- approve.lua and handshake.lua count request() calls per thread; a plain run has none and
  -- reports zeros. Per thread, in thread order, so a script's choices can be replayed.
  local issued, busiest, exhausted = 0, 0, 0
  local per_thread = {}
  for _, thread in ipairs(threads) do
    local count = thread:get("issued") or 0
    issued = issued + count
    busiest = math.max(busiest, count)
    exhausted = exhausted + (thread:get("exhausted") or 0)
    per_thread[#per_thread + 1] = string.format("%d", count)
  end
  -- Before starting, wrk calls request() once on the first thread to inspect the script
  -- (script_verify_request); that request is never sent.
  local sent = math.max(issued - 1, 0)
  local errors = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, '
      .. '"non_2xx": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, '
      .. '"timeouts": %d, "sent": %d, "busiest_thread_issued": %d, "exhausted": %d, '
      .. '"issued_per_thread": [%s]}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    errors.status, errors.connect, errors.read, errors.write, errors.timeout,
    sent, busiest, exhausted, table.concat(per_thread, ", ")
  ))
end
