-- AlterTable
ALTER TABLE "knowledge_bases" ADD COLUMN     "unknownUsageEvents" INTEGER NOT NULL DEFAULT 0;

-- Existing usage events whose token usage is unknown.
UPDATE "knowledge_bases" kb SET "unknownUsageEvents" = e.n
FROM (SELECT "knowledgeBaseId", count(*)::int AS n FROM "usage_events"
      WHERE ("inputTokens" IS NULL OR "outputTokens" IS NULL) AND "category" <> 'digitization'
      GROUP BY "knowledgeBaseId") e
WHERE kb."id" = e."knowledgeBaseId";

-- One round trip per admission decision (lib/budget/ledger.ts, lib/messaging/quota.ts). Each
-- function locks the row it decides on first; every later statement in it runs with a fresh
-- snapshot (READ COMMITTED, VOLATILE function), so it sees what the previous lock holder committed.

-- Records the actual usage of a reservation (the caller holds the KB row lock) and settles it.
CREATE FUNCTION budget_record_usage(
  p_reservation "budget_reservations", p_characters BIGINT, p_input_tokens BIGINT, p_output_tokens BIGINT,
  p_cost NUMERIC, p_model TEXT, p_fallback BOOLEAN, p_rejected BOOLEAN
) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "usage_events" ("id", "knowledgeBaseId", "documentId", "operationKey", "category", "model", "fallback",
                              "rejected", "characters", "inputTokens", "outputTokens", "costUsd")
  VALUES (gen_random_uuid(), p_reservation."knowledgeBaseId", p_reservation."documentId", p_reservation."operationKey",
          p_reservation."category", p_model, p_fallback, p_rejected, p_characters, p_input_tokens, p_output_tokens, p_cost);
  UPDATE "knowledge_bases" SET
    "charactersConsumed" = "charactersConsumed" + p_characters,
    "tokensConsumed" = "tokensConsumed" + COALESCE(p_input_tokens, 0) + COALESCE(p_output_tokens, 0),
    "dollarsConsumed" = "dollarsConsumed" + COALESCE(p_cost, 0),
    "unknownUsageEvents" = "unknownUsageEvents"
      + CASE WHEN p_reservation."category" <> 'digitization' AND (p_input_tokens IS NULL OR p_output_tokens IS NULL) THEN 1 ELSE 0 END
  WHERE "id" = p_reservation."knowledgeBaseId";
  UPDATE "budget_reservations" SET "status" = 'settled', "resolvedAt" = now() WHERE "id" = p_reservation."id";
END $$;

-- Why a KB has no headroom at all, or no row: a limit that is set and used up (consumed + held),
-- an unresolved provider outcome on a capped KB, or unknown usage under a token or dollar limit.
-- For work that exists only to feed later paid work (channel discovery), whatever its own bound.
CREATE FUNCTION budget_headroom(p_kb UUID) RETURNS TABLE (reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  kb "knowledge_bases";
  held_characters BIGINT;
  held_tokens BIGINT;
  held_dollars NUMERIC;
  uncertain INT;
BEGIN
  SELECT * INTO kb FROM "knowledge_bases" WHERE "id" = p_kb;
  IF NOT FOUND THEN RAISE EXCEPTION 'knowledge base % does not exist', p_kb; END IF;
  SELECT COALESCE(sum("characters"), 0), COALESCE(sum("tokens"), 0), COALESCE(sum("dollars"), 0), count(*) FILTER (WHERE "status" = 'uncertain')
    INTO held_characters, held_tokens, held_dollars, uncertain
    FROM "budget_reservations" WHERE "knowledgeBaseId" = p_kb AND "status" IN ('pending', 'uncertain');
  IF (kb."characterLimit" IS NOT NULL OR kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL) AND uncertain > 0 THEN
    RETURN QUERY SELECT 'unresolved_provider_outcome'::TEXT, uncertain || ' operation(s) with an unresolved provider outcome'; RETURN;
  END IF;
  IF (kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL) AND kb."unknownUsageEvents" > 0 THEN
    RETURN QUERY SELECT 'unknown_historical_usage'::TEXT, kb."unknownUsageEvents" || ' usage event(s) with unknown usage'; RETURN;
  END IF;
  IF kb."characterLimit" IS NOT NULL AND kb."charactersConsumed" + held_characters >= kb."characterLimit" THEN
    RETURN QUERY SELECT 'character_limit_exhausted'::TEXT, 'no characters remaining of ' || kb."characterLimit"; RETURN;
  END IF;
  IF kb."tokenLimit" IS NOT NULL AND kb."tokensConsumed" + held_tokens >= kb."tokenLimit" THEN
    RETURN QUERY SELECT 'token_limit_exhausted'::TEXT, 'no tokens remaining of ' || kb."tokenLimit"; RETURN;
  END IF;
  IF kb."dollarLimitUsd" IS NOT NULL AND kb."dollarsConsumed" + held_dollars >= kb."dollarLimitUsd" THEN
    RETURN QUERY SELECT 'dollar_limit_exhausted'::TEXT, 'no dollars remaining of $' || trim_scale(kb."dollarLimitUsd"); RETURN;
  END IF;
END $$;

-- reserve: admitted (with the reservation's id), or the reason and detail of the refusal.
CREATE FUNCTION budget_reserve(
  p_kb UUID, p_operation_key TEXT, p_workflow_id TEXT, p_document_id UUID, p_category TEXT,
  p_characters BIGINT, p_tokens BIGINT, p_dollars NUMERIC, p_request_character_limit BIGINT, p_require_headroom BOOLEAN
) RETURNS TABLE (admitted BOOLEAN, reservation_id UUID, reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  kb "knowledge_bases";
  existing UUID;
  held_characters BIGINT;
  held_tokens BIGINT;
  held_dollars NUMERIC;
  uncertain INT;
  after_characters BIGINT;
  capped BOOLEAN;
  blocked RECORD;
BEGIN
  SELECT * INTO kb FROM "knowledge_bases" WHERE "id" = p_kb FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'knowledge base % does not exist', p_kb; END IF;
  SELECT "id" INTO existing FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF FOUND THEN RETURN QUERY SELECT TRUE, existing, NULL::TEXT, NULL::TEXT; RETURN; END IF;

  -- Pending and uncertain holds count: an uncertain operation may have used its whole bound.
  SELECT COALESCE(sum("characters"), 0), COALESCE(sum("tokens"), 0), COALESCE(sum("dollars"), 0), count(*) FILTER (WHERE "status" = 'uncertain')
    INTO held_characters, held_tokens, held_dollars, uncertain
    FROM "budget_reservations" WHERE "knowledgeBaseId" = p_kb AND "status" IN ('pending', 'uncertain');
  capped := kb."characterLimit" IS NOT NULL OR kb."tokenLimit" IS NOT NULL OR kb."dollarLimitUsd" IS NOT NULL OR p_request_character_limit IS NOT NULL;

  IF capped AND uncertain > 0 AND (p_characters > 0 OR p_tokens > 0 OR p_dollars > 0) THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'unresolved_provider_outcome', uncertain || ' operation(s) with an unresolved provider outcome'; RETURN;
  END IF;
  IF ((p_tokens > 0 AND kb."tokenLimit" IS NOT NULL) OR (p_dollars > 0 AND kb."dollarLimitUsd" IS NOT NULL)) AND kb."unknownUsageEvents" > 0 THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'unknown_historical_usage', kb."unknownUsageEvents" || ' usage event(s) with unknown usage'; RETURN;
  END IF;
  IF p_characters > 0 THEN
    after_characters := kb."charactersConsumed" + held_characters + p_characters;
    IF kb."characterLimit" IS NOT NULL AND after_characters > kb."characterLimit" THEN
      RETURN QUERY SELECT FALSE, NULL::UUID, 'character_limit_exhausted',
        'needs ' || p_characters || ' characters, ' || greatest(kb."characterLimit" - kb."charactersConsumed" - held_characters, 0) || ' remaining of ' || kb."characterLimit";
      RETURN;
    END IF;
    IF p_request_character_limit IS NOT NULL AND after_characters > p_request_character_limit THEN
      RETURN QUERY SELECT FALSE, NULL::UUID, 'request_character_limit',
        'needs ' || after_characters || ' characters in total, the request allows ' || p_request_character_limit;
      RETURN;
    END IF;
  END IF;
  IF p_tokens > 0 AND kb."tokenLimit" IS NOT NULL AND kb."tokensConsumed" + held_tokens + p_tokens > kb."tokenLimit" THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'token_limit_exhausted',
      'needs ' || p_tokens || ' tokens, ' || greatest(kb."tokenLimit" - kb."tokensConsumed" - held_tokens, 0) || ' remaining of ' || kb."tokenLimit";
    RETURN;
  END IF;
  IF p_dollars > 0 AND kb."dollarLimitUsd" IS NOT NULL AND kb."dollarsConsumed" + held_dollars + p_dollars > kb."dollarLimitUsd" THEN
    RETURN QUERY SELECT FALSE, NULL::UUID, 'dollar_limit_exhausted',
      'needs $' || trim_scale(p_dollars) || ', $' || trim_scale(greatest(kb."dollarLimitUsd" - kb."dollarsConsumed" - held_dollars, 0)) || ' remaining of $' || trim_scale(kb."dollarLimitUsd");
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

-- settle: settled | uncertain (usage missing: the hold stays) | already_resolved | unknown_operation.
CREATE FUNCTION budget_settle(
  p_operation_key TEXT, p_characters BIGINT, p_input_tokens BIGINT, p_output_tokens BIGINT,
  p_cost NUMERIC, p_model TEXT, p_fallback BOOLEAN, p_rejected BOOLEAN
) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  kb_id UUID;
  r "budget_reservations";
BEGIN
  SELECT "knowledgeBaseId" INTO kb_id FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF NOT FOUND THEN RETURN 'unknown_operation'; END IF;
  PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb_id FOR UPDATE;
  SELECT * INTO r FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF r."status" NOT IN ('pending', 'uncertain') THEN RETURN 'already_resolved'; END IF;
  IF r."category" <> 'digitization' AND (p_input_tokens IS NULL OR p_output_tokens IS NULL) AND r."status" = 'pending' THEN
    UPDATE "budget_reservations" SET "status" = 'uncertain', "note" = 'provider usage missing' WHERE "id" = r."id";
    RETURN 'uncertain';
  END IF;
  PERFORM budget_record_usage(r, p_characters, p_input_tokens, p_output_tokens, p_cost, p_model, p_fallback, p_rejected);
  RETURN 'settled';
END $$;

-- Group commit (lib/platform/group-commit.ts): admissions that arrive together, in one commit,
-- each decided exactly as budget_reserve decides it alone, in order per KB; the KB rows are locked
-- in ascending order, so two batches never wait for each other in a cycle. A request for a KB that
-- does not exist is answered `missing_knowledge_base` without failing the others. Answers
-- (position in p_requests, decision).
CREATE FUNCTION budget_reserve_batch(p_requests JSONB)
RETURNS TABLE (idx BIGINT, admitted BOOLEAN, reservation_id UUID, reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
  decision RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord, kb."id" AS kb FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS e(item, ord)
    LEFT JOIN "knowledge_bases" kb ON kb."id" = (e.item->>'knowledge_base_id')::UUID
    ORDER BY (e.item->>'knowledge_base_id')::UUID, e.ord
  LOOP
    idx := rec.ord;
    IF rec.kb IS NULL THEN
      admitted := FALSE; reservation_id := NULL; reason := 'missing_knowledge_base'; detail := 'knowledge base ' || (rec.item->>'knowledge_base_id') || ' does not exist';
      RETURN NEXT;
      CONTINUE;
    END IF;
    SELECT * INTO decision FROM budget_reserve(
      rec.kb, rec.item->>'operation_key', rec.item->>'workflow_id', (rec.item->>'document_id')::UUID, rec.item->>'category',
      (rec.item->>'characters')::BIGINT, (rec.item->>'tokens')::BIGINT, (rec.item->>'dollars')::NUMERIC,
      (rec.item->>'request_character_limit')::BIGINT, (rec.item->>'require_headroom')::BOOLEAN);
    admitted := decision.admitted; reservation_id := decision.reservation_id; reason := decision.reason; detail := decision.detail;
    RETURN NEXT;
  END LOOP;
END $$;

-- Settlements that arrive together, in one commit; the KB rows are locked in ascending order, so
-- two batches never wait for each other in a cycle. Answers (position in p_items, outcome).
CREATE FUNCTION budget_settle_batch(p_items JSONB)
RETURNS TABLE (idx BIGINT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
    LEFT JOIN "budget_reservations" r ON r."operationKey" = e.item->>'operation_key'
    ORDER BY r."knowledgeBaseId" NULLS FIRST, e.ord
  LOOP
    idx := rec.ord;
    outcome := budget_settle(
      rec.item->>'operation_key', (rec.item->>'characters')::BIGINT, (rec.item->>'input_tokens')::BIGINT,
      (rec.item->>'output_tokens')::BIGINT, (rec.item->>'cost')::NUMERIC, rec.item->>'model',
      (rec.item->>'fallback')::BOOLEAN, (rec.item->>'rejected')::BOOLEAN);
    RETURN NEXT;
  END LOOP;
END $$;

-- Quota keys of the messaging interface: admitted | revoked | exhausted, with the key's numbers.
-- The hold is committed without waiting for the WAL flush (synchronous_commit off for this one
-- transaction): it sits before a request's first byte, and a durable commit costs a flush (about
-- 3 ms on the development VMs). The WAL writer flushes it within wal_writer_delay, as does the
-- next durable commit; a PostgreSQL crash inside that window can lose the hold, never the usage:
-- quota_settle is durable and charges a request whose hold it cannot find (lib/messaging/quota.ts).
CREATE FUNCTION quota_reserve(
  p_key UUID, p_operation_key TEXT, p_endpoint TEXT, p_tokens BIGINT, p_hold_ms BIGINT
) RETURNS TABLE (outcome TEXT, token_amount BIGINT, remaining BIGINT) LANGUAGE plpgsql AS $$
DECLARE
  k "quota_keys";
  held BIGINT;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  SELECT * INTO k FROM "quota_keys" WHERE "id" = p_key FOR UPDATE;
  IF NOT FOUND OR k."revokedAt" IS NOT NULL THEN RETURN QUERY SELECT 'revoked'::TEXT, NULL::BIGINT, NULL::BIGINT; RETURN; END IF;
  SELECT COALESCE(sum("tokens"), 0) INTO held FROM "quota_reservations"
   WHERE "quotaKeyId" = p_key AND "status" = 'pending' AND "expiresAt" > now();
  IF p_tokens > k."tokenAmount" - k."tokensConsumed" - held THEN
    RETURN QUERY SELECT 'exhausted'::TEXT, k."tokenAmount", k."tokenAmount" - k."tokensConsumed" - held; RETURN;
  END IF;
  INSERT INTO "quota_reservations" ("id", "quotaKeyId", "operationKey", "endpoint", "tokens", "expiresAt")
  VALUES (gen_random_uuid(), p_key, p_operation_key, p_endpoint, p_tokens, now() + p_hold_ms * INTERVAL '1 millisecond');
  RETURN QUERY SELECT 'admitted'::TEXT, k."tokenAmount", k."tokenAmount" - k."tokensConsumed" - held - p_tokens;
END $$;

-- Settles a quota hold once (unknown usage: charged the whole hold): settled | already_resolved.
-- A hold that is not there at all (lost in a PostgreSQL crash, see quota_reserve) is recorded as
-- settled now, on the key and with the size the caller gives, so no used token goes uncharged.
CREATE FUNCTION quota_settle(p_operation_key TEXT, p_used BIGINT, p_key UUID, p_held BIGINT, p_endpoint TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  key_id UUID;
  used BIGINT;
BEGIN
  UPDATE "quota_reservations" SET "status" = 'settled', "usedTokens" = COALESCE(p_used, "tokens"), "resolvedAt" = now()
   WHERE "operationKey" = p_operation_key AND "status" = 'pending'
   RETURNING "quotaKeyId", "usedTokens" INTO key_id, used;
  IF NOT FOUND THEN
    IF p_key IS NULL OR EXISTS (SELECT 1 FROM "quota_reservations" WHERE "operationKey" = p_operation_key) THEN RETURN 'already_resolved'; END IF;
    key_id := p_key;
    used := COALESCE(p_used, p_held);
    INSERT INTO "quota_reservations" ("id", "quotaKeyId", "operationKey", "endpoint", "tokens", "status", "usedTokens", "expiresAt", "resolvedAt")
    VALUES (gen_random_uuid(), p_key, p_operation_key, p_endpoint, p_held, 'settled', used, now(), now());
  END IF;
  UPDATE "quota_keys" SET "tokensConsumed" = "tokensConsumed" + used, "lastUsedAt" = now() WHERE "id" = key_id;
  RETURN 'settled';
END $$;
