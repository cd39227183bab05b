-- Request-rate counters are checked on every request and are worth nothing after a crash (a
-- limiter that forgets its last minute lets a key through for one minute): unlogged, their
-- updates write no WAL and their commits wait for no flush. Not expressible in schema.prisma.
ALTER TABLE "rate_limit_windows" SET UNLOGGED;
