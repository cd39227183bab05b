-- Records the actual usage of a reservation (the caller holds the KB row lock) and settles it.
CREATE OR REPLACE FUNCTION budget_record_usage(
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
