-- One request of `p_key` from client `p_owner`, decided against the key's schedule: one turn every
-- `p_interval_ms`, up to `p_burst` at once. In order: a turn this client was booked and told to come
-- back for, once that time has come (a tenth of a second early is taken: timers); a free turn now;
-- else the next free turn is booked for it and it is told to come back then (whole seconds, as
-- Retry-After says it), unless the key already has `p_max_reserved` turns booked or this client
-- `p_owner_max` (it is then told when its first turn comes, and nothing is booked). A booked turn
-- unused `p_grace_ms` after its time is given up.
CREATE OR REPLACE FUNCTION rate_limit_decide(p_key TEXT, p_owner TEXT, p_interval_ms FLOAT8, p_burst INTEGER, p_max_reserved INTEGER, p_owner_max INTEGER, p_grace_ms FLOAT8)
RETURNS TABLE (allowed BOOLEAN, retry_after_ms FLOAT8, booked BOOLEAN, tat_ms FLOAT8, now_ms FLOAT8, reserved INTEGER)
LANGUAGE plpgsql AS $$
DECLARE
  v_now TIMESTAMPTZ := clock_timestamp();
  v_interval INTERVAL := make_interval(secs => p_interval_ms / 1000);
  v_tau INTERVAL := make_interval(secs => (p_burst - 1) * p_interval_ms / 1000);
  v_tat TIMESTAMPTZ;
  v_reserved INTEGER;
  v_used BIGINT;
  v_owner_pending INTEGER := 0;
  v_owner_due TIMESTAMPTZ;
  v_due TIMESTAMPTZ;
  v_retry FLOAT8;
BEGIN
  INSERT INTO rate_limit_schedules AS s (key, tat) VALUES (p_key, v_now) ON CONFLICT (key) DO NOTHING;
  SELECT s.tat, s.reserved INTO v_tat, v_reserved FROM rate_limit_schedules s WHERE s.key = p_key FOR UPDATE;
  IF v_reserved > 0 THEN
    -- Turns given up go; the count is taken again (a schedule forgotten and begun anew counts none of its old turns).
    DELETE FROM rate_limit_reservations r WHERE r.key = p_key AND r.expires < v_now;
    DELETE FROM rate_limit_reservations r
    WHERE r.id = (SELECT r2.id FROM rate_limit_reservations r2 WHERE r2.key = p_key AND r2.owner = p_owner AND r2.due <= v_now + interval '100 milliseconds' ORDER BY r2.due LIMIT 1)
    RETURNING r.id INTO v_used;
    SELECT count(*)::INTEGER INTO v_reserved FROM rate_limit_reservations r WHERE r.key = p_key;
    IF v_used IS NOT NULL THEN
      UPDATE rate_limit_schedules s SET reserved = v_reserved WHERE s.key = p_key;
      RETURN QUERY SELECT true, 0::FLOAT8, false, (extract(epoch FROM v_tat) * 1000)::FLOAT8, (extract(epoch FROM v_now) * 1000)::FLOAT8, v_reserved;
      RETURN;
    END IF;
  END IF;
  -- A millisecond of slack: the turns are sums of intervals that are not whole microseconds.
  IF v_tat - v_tau <= v_now + interval '1 millisecond' THEN
    v_tat := greatest(v_tat, v_now) + v_interval;
    UPDATE rate_limit_schedules s SET tat = v_tat, reserved = v_reserved WHERE s.key = p_key;
    RETURN QUERY SELECT true, 0::FLOAT8, false, (extract(epoch FROM v_tat) * 1000)::FLOAT8, (extract(epoch FROM v_now) * 1000)::FLOAT8, v_reserved;
    RETURN;
  END IF;
  IF v_reserved > 0 THEN
    SELECT count(*)::INTEGER, min(r.due) INTO v_owner_pending, v_owner_due FROM rate_limit_reservations r WHERE r.key = p_key AND r.owner = p_owner;
  END IF;
  IF v_owner_pending >= p_owner_max OR v_reserved >= p_max_reserved THEN
    -- Nothing booked: back when this client's first turn comes, or when the booked turns are through.
    v_retry := extract(epoch FROM coalesce(v_owner_due, v_tat - v_tau) - v_now) * 1000;
    UPDATE rate_limit_schedules s SET reserved = v_reserved WHERE s.key = p_key;
    RETURN QUERY SELECT false, v_retry, false, (extract(epoch FROM v_tat) * 1000)::FLOAT8, (extract(epoch FROM v_now) * 1000)::FLOAT8, v_reserved;
    RETURN;
  END IF;
  -- The turn comes at tat - tau; the client is told the whole seconds up to it.
  v_retry := ceil(extract(epoch FROM v_tat - v_tau - v_now)) * 1000;
  v_due := v_now + make_interval(secs => v_retry / 1000);
  INSERT INTO rate_limit_reservations (key, owner, due, expires) VALUES (p_key, p_owner, v_due, v_due + make_interval(secs => p_grace_ms / 1000));
  v_tat := v_tat + v_interval;
  UPDATE rate_limit_schedules s SET tat = v_tat, reserved = v_reserved + 1 WHERE s.key = p_key;
  RETURN QUERY SELECT false, v_retry, true, (extract(epoch FROM v_tat) * 1000)::FLOAT8, (extract(epoch FROM v_now) * 1000)::FLOAT8, v_reserved + 1;
END;
$$;
