-- settle: settled | uncertain (usage missing: the hold stays) | already_resolved | unknown_operation.
CREATE OR REPLACE FUNCTION budget_settle(
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
