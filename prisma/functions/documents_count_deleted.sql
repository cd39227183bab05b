-- Deleted documents leave the count. A document deleted by the cascade of its knowledge base (or
-- partner) has no KB row left to find its partner by: the KB's own trigger takes them off first.
CREATE OR REPLACE FUNCTION documents_count_deleted() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "partners" p SET "documentCount" = p."documentCount" - c.n
  FROM (SELECT kb."partnerId", count(*)::int AS n FROM deleted d JOIN "knowledge_bases" kb ON kb."id" = d."knowledgeBaseId" GROUP BY kb."partnerId") c
  WHERE p."id" = c."partnerId";
  RETURN NULL;
END $$;
