-- AlterTable
ALTER TABLE "partners" ADD COLUMN     "documentCount" INTEGER NOT NULL DEFAULT 0;

-- CreateIndex
CREATE INDEX "documents_knowledgeBaseId_createdAt_id_idx" ON "documents"("knowledgeBaseId", "createdAt", "id");

-- CreateIndex
CREATE INDEX "documents_knowledgeBaseId_embeddingStatus_idx" ON "documents"("knowledgeBaseId", "embeddingStatus");

-- The partner's documents, counted once for the documents that exist.
UPDATE "partners" p SET "documentCount" = c.n
FROM (SELECT kb."partnerId", count(*)::int AS n FROM "documents" d JOIN "knowledge_bases" kb ON kb."id" = d."knowledgeBaseId" GROUP BY kb."partnerId") c
WHERE p."id" = c."partnerId";

-- max_documents without counting the partner's documents at every creation: each statement that
-- inserts documents adds them to their partner's count and is refused (the insert rolled back with
-- it) when the count would pass maxDocuments. The UPDATE waits for a concurrent inserter of the same
-- partner and is evaluated again on the row it committed, so racing creations never pass the limit;
-- the row is locked only from this statement to its transaction's commit (a single-statement insert:
-- a moment).
CREATE FUNCTION documents_count_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS $$
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

CREATE TRIGGER "documents_count_inserted"
AFTER INSERT ON "documents" REFERENCING NEW TABLE AS inserted
FOR EACH STATEMENT EXECUTE FUNCTION documents_count_inserted();

-- Deleted documents leave the count. A document deleted by the cascade of its knowledge base (or
-- partner) has no KB row left to find its partner by: the KB's own trigger takes them off first.
CREATE FUNCTION documents_count_deleted() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "partners" p SET "documentCount" = p."documentCount" - c.n
  FROM (SELECT kb."partnerId", count(*)::int AS n FROM deleted d JOIN "knowledge_bases" kb ON kb."id" = d."knowledgeBaseId" GROUP BY kb."partnerId") c
  WHERE p."id" = c."partnerId";
  RETURN NULL;
END $$;

CREATE TRIGGER "documents_count_deleted"
AFTER DELETE ON "documents" REFERENCING OLD TABLE AS deleted
FOR EACH STATEMENT EXECUTE FUNCTION documents_count_deleted();

CREATE FUNCTION knowledge_bases_uncount_documents() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "partners" SET "documentCount" = "documentCount" - (SELECT count(*)::int FROM "documents" WHERE "knowledgeBaseId" = OLD."id")
  WHERE "id" = OLD."partnerId";
  RETURN OLD;
END $$;

CREATE TRIGGER "knowledge_bases_uncount_documents"
BEFORE DELETE ON "knowledge_bases"
FOR EACH ROW EXECUTE FUNCTION knowledge_bases_uncount_documents();
