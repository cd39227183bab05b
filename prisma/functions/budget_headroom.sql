-- The admission rules of one_round_trip_admission, unchanged, reading the held amounts and the
-- uncertain count from the KB row.
CREATE OR REPLACE FUNCTION budget_headroom(p_kb UUID) RETURNS TABLE (reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  kb "knowledge_bases";
BEGIN
  SELECT * INTO kb FROM "knowledge_bases" WHERE "id" = p_kb;
  IF NOT FOUND THEN RAISE EXCEPTION 'knowledge base % does not exist', p_kb; END IF;
  IF (kb."characterLimit" IS NOT NULL OR kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL) AND kb."uncertainHolds" > 0 THEN
    RETURN QUERY SELECT 'unresolved_provider_outcome'::TEXT, kb."uncertainHolds" || ' operation(s) with an unresolved provider outcome'; RETURN;
  END IF;
  IF (kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL) AND kb."unknownUsageEvents" > 0 THEN
    RETURN QUERY SELECT 'unknown_historical_usage'::TEXT, kb."unknownUsageEvents" || ' usage event(s) with unknown usage'; RETURN;
  END IF;
  IF kb."characterLimit" IS NOT NULL AND kb."charactersConsumed" + kb."charactersHeld" >= kb."characterLimit" THEN
    RETURN QUERY SELECT 'character_limit_exhausted'::TEXT, 'no characters remaining of ' || kb."characterLimit"; RETURN;
  END IF;
  IF kb."tokenLimit" IS NOT NULL AND kb."tokensConsumed" + kb."tokensHeld" >= kb."tokenLimit" THEN
    RETURN QUERY SELECT 'token_limit_exhausted'::TEXT, 'no tokens remaining of ' || kb."tokenLimit"; RETURN;
  END IF;
  IF kb."dollarLimitUsd" IS NOT NULL AND kb."dollarsConsumed" + kb."dollarsHeld" >= kb."dollarLimitUsd" THEN
    RETURN QUERY SELECT 'dollar_limit_exhausted'::TEXT, 'no dollars remaining of $' || trim_scale(kb."dollarLimitUsd"); RETURN;
  END IF;
END $$;
