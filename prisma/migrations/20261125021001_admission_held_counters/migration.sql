-- AlterTable
ALTER TABLE "knowledge_bases" ADD COLUMN     "charactersHeld" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "dollarsHeld" DECIMAL(30,8) NOT NULL DEFAULT 0,
ADD COLUMN     "tokensHeld" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "uncertainHolds" INTEGER NOT NULL DEFAULT 0;

-- What the pending and uncertain holds of each KB hold, counted once for the holds that exist.
UPDATE "knowledge_bases" kb SET
  "charactersHeld" = h.characters, "tokensHeld" = h.tokens, "dollarsHeld" = h.dollars, "uncertainHolds" = h.uncertain
FROM (SELECT "knowledgeBaseId", sum("characters") AS characters, sum("tokens") AS tokens, sum("dollars") AS dollars,
             count(*) FILTER (WHERE "status" = 'uncertain')::int AS uncertain
      FROM "budget_reservations" WHERE "status" IN ('pending', 'uncertain') GROUP BY "knowledgeBaseId") h
WHERE kb."id" = h."knowledgeBaseId";

-- Every change of a hold (whoever writes it: the ledger's functions, a Prisma update, a deletion)
-- moves the KB's counters in the same transaction. An admission then reads consumed + held from
-- the row it has locked, in constant time: summing the holds instead cost a visit of every pending
-- hold of the KB (and of every index entry of a hold settled since the last vacuum) per decision,
-- which grew with concurrency on one KB. A KB deleted with its holds (cascade) has no row left to
-- count on: the update then finds nothing.
CREATE FUNCTION budget_reservations_keep_held() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE
  kb UUID;
  d_characters BIGINT := 0;
  d_tokens BIGINT := 0;
  d_dollars NUMERIC := 0;
  d_uncertain INT := 0;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    IF OLD."status" IN ('pending', 'uncertain') THEN
      kb := OLD."knowledgeBaseId";
      d_characters := -OLD."characters"; d_tokens := -OLD."tokens"; d_dollars := -OLD."dollars";
      IF OLD."status" = 'uncertain' THEN d_uncertain := -1; END IF;
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NEW."status" IN ('pending', 'uncertain') THEN
      kb := NEW."knowledgeBaseId";
      d_characters := d_characters + NEW."characters"; d_tokens := d_tokens + NEW."tokens"; d_dollars := d_dollars + NEW."dollars";
      IF NEW."status" = 'uncertain' THEN d_uncertain := d_uncertain + 1; END IF;
    END IF;
  END IF;
  IF d_characters <> 0 OR d_tokens <> 0 OR d_dollars <> 0 OR d_uncertain <> 0 THEN
    UPDATE "knowledge_bases" SET
      "charactersHeld" = "charactersHeld" + d_characters, "tokensHeld" = "tokensHeld" + d_tokens,
      "dollarsHeld" = "dollarsHeld" + d_dollars, "uncertainHolds" = "uncertainHolds" + d_uncertain
    WHERE "id" = kb;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "budget_reservations_keep_held"
AFTER INSERT OR DELETE OR UPDATE OF "status", "characters", "tokens", "dollars" ON "budget_reservations"
FOR EACH ROW EXECUTE FUNCTION budget_reservations_keep_held();

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

-- release and markUncertain in one round trip each, taking the KB row lock before the hold's row
-- as settle does (the trigger then moves the counters on the locked row), so that no two of them
-- can wait for each other in a cycle. true when the hold was pending and changed.
CREATE FUNCTION budget_release(p_operation_key TEXT, p_note TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  kb_id UUID;
BEGIN
  SELECT "knowledgeBaseId" INTO kb_id FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF NOT FOUND THEN RETURN FALSE; END IF;
  PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb_id FOR UPDATE;
  UPDATE "budget_reservations" SET "status" = 'released', "note" = p_note, "resolvedAt" = now()
   WHERE "operationKey" = p_operation_key AND "status" = 'pending';
  RETURN FOUND;
END $$;

CREATE FUNCTION budget_mark_uncertain(p_operation_key TEXT, p_note TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  kb_id UUID;
BEGIN
  SELECT "knowledgeBaseId" INTO kb_id FROM "budget_reservations" WHERE "operationKey" = p_operation_key;
  IF NOT FOUND THEN RETURN FALSE; END IF;
  PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb_id FOR UPDATE;
  UPDATE "budget_reservations" SET "status" = 'uncertain', "note" = p_note
   WHERE "operationKey" = p_operation_key AND "status" = 'pending';
  RETURN FOUND;
END $$;

-- The group-commit functions of one_round_trip_admission drove their loop with a join of the
-- request list to knowledge_bases (reserve) or budget_reservations (settle). The planner estimates
-- 100 rows for jsonb_array_elements, so until a table is large it prefers a hash join over a
-- sequential scan of the whole table, once per batch: with budget_reservations growing by every
-- admission, each batch read every reservation ever made, and a KB row updated thousands of times
-- between two vacuums made knowledge_bases as slow to scan (measured: 4,000 admissions/s falling
-- below 300/s within a minute on one KB). The loops now read the request list alone; each request
-- costs single-row index probes only, whatever the size of the tables. Decisions, answers and the
-- ascending lock order are unchanged.

CREATE OR REPLACE FUNCTION budget_reserve_batch(p_requests JSONB)
RETURNS TABLE (idx BIGINT, admitted BOOLEAN, reservation_id UUID, reason TEXT, detail TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
  decision RECORD;
  kb UUID;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS e(item, ord)
    ORDER BY (e.item->>'knowledge_base_id')::UUID, e.ord
  LOOP
    idx := rec.ord;
    kb := (rec.item->>'knowledge_base_id')::UUID;
    -- Locked here (ascending order); budget_reserve's own FOR UPDATE then finds the lock held.
    PERFORM 1 FROM "knowledge_bases" WHERE "id" = kb FOR UPDATE;
    IF NOT FOUND THEN
      admitted := FALSE; reservation_id := NULL; reason := 'missing_knowledge_base'; detail := 'knowledge base ' || (rec.item->>'knowledge_base_id') || ' does not exist';
      RETURN NEXT;
      CONTINUE;
    END IF;
    SELECT * INTO decision FROM budget_reserve(
      kb, rec.item->>'operation_key', rec.item->>'workflow_id', (rec.item->>'document_id')::UUID, rec.item->>'category',
      (rec.item->>'characters')::BIGINT, (rec.item->>'tokens')::BIGINT, (rec.item->>'dollars')::NUMERIC,
      (rec.item->>'request_character_limit')::BIGINT, (rec.item->>'require_headroom')::BOOLEAN);
    admitted := decision.admitted; reservation_id := decision.reservation_id; reason := decision.reason; detail := decision.detail;
    RETURN NEXT;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION budget_settle_batch(p_items JSONB)
RETURNS TABLE (idx BIGINT, outcome TEXT) LANGUAGE plpgsql AS $$
DECLARE
  rec RECORD;
BEGIN
  FOR rec IN
    SELECT e.item, e.ord FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
    ORDER BY (SELECT r."knowledgeBaseId" FROM "budget_reservations" r WHERE r."operationKey" = e.item->>'operation_key') NULLS FIRST, e.ord
  LOOP
    idx := rec.ord;
    outcome := budget_settle(
      rec.item->>'operation_key', (rec.item->>'characters')::BIGINT, (rec.item->>'input_tokens')::BIGINT,
      (rec.item->>'output_tokens')::BIGINT, (rec.item->>'cost')::NUMERIC, rec.item->>'model',
      (rec.item->>'fallback')::BOOLEAN, (rec.item->>'rejected')::BOOLEAN);
    RETURN NEXT;
  END LOOP;
END $$;
