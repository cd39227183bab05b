// Prisma 7 configuration, read by the Prisma CLI (`scripts/prisma.sh ...`).
// The CLI never loads `.env` files by itself: DATABASE_URL must be in the environment
// (scripts/prisma.sh provides a local default).
import { defineConfig, env } from 'prisma/config';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: {
    path: 'prisma/migrations',
  },
  datasource: {
    url: env('DATABASE_URL'),
  },
});
