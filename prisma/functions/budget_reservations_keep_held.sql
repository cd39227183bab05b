-- Every change of a hold (whoever writes it: the ledger's functions, a Prisma update, a deletion)
-- moves the KB's counters in the same transaction. An admission then reads consumed + held from
-- the row it has locked, in constant time: summing the holds instead cost a visit of every pending
-- hold of the KB (and of every index entry of a hold settled since the last vacuum) per decision,
-- which grew with concurrency on one KB. A KB deleted with its holds (cascade) has no row left to
-- count on: the update then finds nothing.
CREATE OR REPLACE FUNCTION budget_reservations_keep_held() RETURNS TRIGGER LANGUAGE plpgsql AS $$
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
