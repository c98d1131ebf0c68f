-- wrk script for scripts/bench-ingest: POSTs distinct, signed PXP deliveries.
-- Usage: wrk -t THREADS -s bench-ingest.lua URL -- POOL_FILE TIMESTAMP THREADS   (acked event ids go to $BENCH_ACKED_FILE)
-- POOL_FILE (bench-pool.py): line 1/2 the body around the request id, then "<X-Request-Id> <X-Signature>" lines,
-- all signed with TIMESTAMP. Thread k of n takes every n-th line, so no two requests share an id (each one is a new
-- row) until the pool runs out; then it wraps and the repeats answer "duplicate" (counted separately).

local threads = {}
local counter = 0

function setup(thread)
    thread:set("tid", counter)
    table.insert(threads, thread)
    counter = counter + 1
end

function init(args)
    local f = assert(io.open(args[1], "r"))
    prefix = f:read("*l")
    suffix = f:read("*l")
    timestamp = args[2]
    ids, sigs = {}, {}
    local n, i = tonumber(args[3]), 0
    for line in f:lines() do
        if i % n == tid then
            local id, sig = line:match("^(%S+) (%S+)$")
            ids[#ids + 1] = id
            sigs[#sigs + 1] = sig
        end
        i = i + 1
    end
    f:close()
    next_index = 1
    accepted, duplicate, other = 0, 0, 0
    acked = {}
    wrapped = 0
end

function request()
    local k = next_index
    if k > #ids then k = 1; wrapped = wrapped + 1 end
    next_index = k + 1
    local id = ids[k]
    return wrk.format("POST", nil, {
        ["Content-Type"] = "application/json",
        ["X-Request-Id"] = id,
        ["X-Signature-Timestamp"] = timestamp,
        ["X-Signature"] = sigs[k],
    }, prefix .. id .. suffix)
end

function response(status, headers, body)
    if status == 200 then
        local eid = body:match('"status":"accepted","event_id":(%d+)')
        if eid then
            accepted = accepted + 1
            acked[accepted] = eid
        else
            duplicate = duplicate + 1
        end
    else
        other = other + 1
    end
end

function done(summary, latency, requests)
    local a, d, o, w = 0, 0, 0, 0
    local out = assert(io.open(os.getenv("BENCH_ACKED_FILE") or "acked.txt", "w"))
    for _, t in ipairs(threads) do
        a = a + t:get("accepted")
        d = d + t:get("duplicate")
        o = o + t:get("other")
        w = w + t:get("wrapped")
        for _, eid in ipairs(t:get("acked")) do out:write(eid, "\n") end
    end
    out:close()
    local e = summary.errors
    io.write(string.format(
        "BENCH duration_us=%d requests=%d accepted=%d duplicate=%d non2xx=%d other=%d wrapped=%d " ..
        "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
        summary.duration, summary.requests, a, d, e.status, o, w, e.connect, e.read, e.write, e.timeout,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
