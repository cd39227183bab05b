-- max_documents without counting the partner's documents at every creation: each statement that
-- inserts documents adds them to their partner's count and is refused (the insert rolled back with
-- it) when the count would pass maxDocuments. The UPDATE waits for a concurrent inserter of the same
-- partner and is evaluated again on the row it committed, so racing creations never pass the limit;
-- the row is locked only from this statement to its transaction's commit (a single-statement insert:
-- a moment).
CREATE OR REPLACE FUNCTION documents_count_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS $$
DECLARE
  over RECORD;
BEGIN
  FOR over IN
    UPDATE "partners" p SET "documentCount" = p."documentCount" + c.n
    FROM (SELECT kb."partnerId", count(*)::int AS n FROM inserted i JOIN "knowledge_bases" kb ON kb."id" = i."knowledgeBaseId" GROUP BY kb."partnerId") c
    WHERE p."id" = c."partnerId"
    RETURNING p."documentCount", p."maxDocuments"
  LOOP
    IF over."documentCount" > over."maxDocuments" THEN
      RAISE EXCEPTION 'QUOTA_EXCEEDED:max_documents (the partner may hold % documents)', over."maxDocuments" USING ERRCODE = 'P0001';
    END IF;
  END LOOP;
  RETURN NULL;
END $$;
