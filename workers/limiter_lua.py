"""The two Lua scripts behind ``workers.limiter_redis.RedisLimiter`` (GCRA reservations).

State of one endpoint budget: one Redis hash ``KEYS[1]`` with fields

- ``r``: theoretical arrival time (TAT) of the requests dimension,
- ``t``: TAT of the tokens dimension,
- ``b``: "blocked until" (after a 429 with Retry-After),

all in microseconds of Redis ``TIME`` (the one clock every worker shares). A TAT at or
before now means an empty bucket, so the hash expires once every field is in the past.

Units: ``interval`` is microseconds of budget per unit (per request, per token);
``burst`` is the burst tolerance in microseconds. ``workers/limiter.py`` mirrors this
arithmetic in Python for ``MemoryLimiter``; keep the two in step.
"""

from __future__ import annotations

#: Reserve one request + ARGV[5] tokens: commit both dimensions, return the delay.
#:
#: ARGV: 1 request interval, 2 request burst, 3 token interval, 4 token burst (an
#: interval of 0 = no budget in that dimension), 5 tokens, 6 token correction (signed,
#: a settle() folded into this call, applied first).
#: Returns {delay_us, blocked_remaining_us, grant_us}.
RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'r', 't', 'b')
local tat_r = math.max(tonumber(s[1]) or 0, now)
local tat_t = math.max(tonumber(s[2]) or 0, now)
local blocked = tonumber(s[3]) or 0
local int_r, burst_r = tonumber(ARGV[1]), tonumber(ARGV[2])
local int_t, burst_t = tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, adjust = tonumber(ARGV[5]), tonumber(ARGV[6])
if int_t > 0 and adjust ~= 0 then
  tat_t = math.max(tat_t + adjust * int_t, now)
end
local inc_r, inc_t = int_r, cost * int_t
burst_t = math.max(burst_t, inc_t)  -- a call larger than the burst goes on an empty bucket
local grant = math.max(now, blocked)
if int_r > 0 then grant = math.max(grant, tat_r + inc_r - burst_r) end
if int_t > 0 then grant = math.max(grant, tat_t + inc_t - burst_t) end
local horizon = math.max(grant, blocked)
if int_r > 0 then
  tat_r = math.max(tat_r + inc_r, grant + math.min(inc_r, burst_r))
  redis.call('HSET', KEYS[1], 'r', string.format('%.0f', tat_r))
  horizon = math.max(horizon, tat_r)
end
if int_t > 0 then
  tat_t = math.max(tat_t + inc_t, grant + math.min(inc_t, burst_t))
  redis.call('HSET', KEYS[1], 't', string.format('%.0f', tat_t))
  horizon = math.max(horizon, tat_t)
end
if int_r > 0 or int_t > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil((horizon - now) / 1000) + 1000)
end
return {math.floor(grant - now), math.floor(math.max(blocked - now, 0)), math.floor(grant)}
"""

#: Correct the tokens dimension and/or block the endpoint, without reserving.
#:
#: ARGV: 1 token interval, 2 token correction (signed tokens), 3 block for (us, >= 0).
#: Returns the blocked-until remaining in microseconds.
ADJUST = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'r', 't', 'b')
local tat_r = tonumber(s[1]) or 0
local tat_t = tonumber(s[2]) or 0
local blocked = tonumber(s[3]) or 0
local int_t, adjust, block = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if int_t > 0 and adjust ~= 0 then
  tat_t = math.max(math.max(tat_t, now) + adjust * int_t, now)
  redis.call('HSET', KEYS[1], 't', string.format('%.0f', tat_t))
end
if block > 0 and now + block > blocked then
  blocked = now + block
  redis.call('HSET', KEYS[1], 'b', string.format('%.0f', blocked))
end
local horizon = math.max(tat_r, tat_t, blocked)
if horizon > now then
  redis.call('PEXPIRE', KEYS[1], math.ceil((horizon - now) / 1000) + 1000)
else
  redis.call('DEL', KEYS[1])  -- every field in the past: the same as an empty budget
end
return math.floor(math.max(blocked - now, 0))
"""
