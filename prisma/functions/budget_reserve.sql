CREATE OR REPLACE FUNCTION budget_reserve(
  p_kb UUID, p_operation_key TEXT, p_workflow_id TEXT, p_document_id UUID, p_category TEXT,
  p_characters BIGINT, p_tokens BIGINT, p_dollars NUMERIC, p_request_character_limit BIGINT, p_require_headroom BOOLEAN
) RETURNS TABLE (admitted BOOLEAN, reservation_id UUID, reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  kb "knowledge_bases";
  existing UUID;
  after_characters BIGINT;
  capped BOOLEAN;
  blocked RECORD;
BEGIN
  SELECT * INTO kb FROM "knowledge_bases" WHERE "id" = p_kb FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'knowledge base % does not exist', p_kb; END IF;
  SELECT "id" INTO existing FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF FOUND THEN RETURN QUERY SELECT TRUE, existing, NULL::TEXT, NULL::TEXT; RETURN; END IF;

  -- Pending and uncertain holds count: an uncertain operation may have used its whole bound.
  capped := kb."characterLimit" IS NOT NULL OR kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL OR p_request_character_limit IS NOT NULL;
  IF capped AND kb."uncertainHolds" > 0 AND (p_characters > 0 OR p_tokens > 0 OR p_dollars > 0) THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'unresolved_provider_outcome', kb."uncertainHolds" || ' operation(s) with an unresolved provider outcome'; RETURN;
  END IF;
  IF ((p_tokens > 0 AND kb."tokenLimit" IS NOT NULL) OR (p_dollars > 0 AND kb."dollarLimitUsd" IS NOT NULL)) AND kb."unknownUsageEvents" > 0 THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'unknown_historical_usage', kb."unknownUsageEvents" || ' usage event(s) with unknown usage'; RETURN;
  END IF;
  IF p_characters > 0 THEN
    after_characters := kb."charactersConsumed" + kb."charactersHeld" + p_characters;
    IF kb."characterLimit" IS NOT NULL AND after_characters > kb."characterLimit" THEN
      RETURN QUERY SELECT FALSE, NULL::UUID, 'character_limit_exhausted',
        'needs ' || p_characters || ' characters, ' || greatest(kb."characterLimit" - kb."charactersConsumed" - kb."charactersHeld", 0) || ' remaining of ' || kb."characterLimit";
      RETURN;
    END IF;
    IF p_request_character_limit IS NOT NULL AND after_characters > p_request_character_limit THEN
      RETURN QUERY SELECT FALSE, NULL::UUID, 'request_character_limit',
        'needs ' || after_characters || ' characters in total, the request allows ' || p_request_character_limit;
      RETURN;
    END IF;
  END IF;
  IF p_tokens > 0 AND kb."tokenLimit" IS NOT NULL AND kb."tokensConsumed" + kb."tokensHeld" + p_tokens > kb."tokenLimit" THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'token_limit_exhausted',
      'needs ' || p_tokens || ' tokens, ' || greatest(kb."tokenLimit" - kb."tokensConsumed" - kb."tokensHeld", 0) || ' remaining of ' || kb."tokenLimit";
    RETURN;
  END IF;
  IF p_dollars > 0 AND kb."dollarLimitUsd" IS NOT NULL AND kb."dollarsConsumed" + kb."dollarsHeld" + p_dollars > kb."dollarLimitUsd" THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'dollar_limit_exhausted',
      'needs $' || trim_scale(p_dollars) || ', $' || trim_scale(greatest(kb."dollarLimitUsd" - kb."dollarsConsumed" - kb."dollarsHeld", 0)) || ' remaining of $' || trim_scale(kb."dollarLimitUsd");
    RETURN;
  END IF;
  IF p_require_headroom THEN
    SELECT * INTO blocked FROM budget_headroom(p_kb);
    IF FOUND THEN RETURN QUERY SELECT FALSE, NULL::UUID, blocked.reason, blocked.detail; RETURN; END IF;
  END IF;

  INSERT INTO "budget_reservations" ("id", "knowledgeBaseId", "operationKey", "workflowId", "documentId", "category", "characters", "tokens", "dollars")
  VALUES (gen_random_uuid(), p_kb, p_operation_key, p_workflow_id, p_document_id, p_category, p_characters, p_tokens, p_dollars)
  RETURNING "id" INTO existing;
  RETURN QUERY SELECT TRUE, existing, NULL::TEXT, NULL::TEXT;
END $$;
