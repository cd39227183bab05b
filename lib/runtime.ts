import type { Config } from './config.js';
import { createDb, type Db } from './db.js';
import { LocalFileStorage, type FileStorage } from './storage.js';
import { VectorIndex } from './providers/vector-index.js';
import { LocalSentenceEncoder, type EmbeddingProvider } from './providers/embeddings.js';
import { createLogger, type Logger } from './logger.js';

/** The long-lived clients a process (API or worker) shares, built once from the configuration. */
export interface Services {
  config: Config;
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  log: Logger;
}

export function createServices(config: Config, component: string): Services {
  return {
    config,
    db: createDb(config.databaseUrl),
    storage: new LocalFileStorage(config.storageDir),
    index: new VectorIndex(config.weaviateUrl),
    embedder: new LocalSentenceEncoder(),
    log: createLogger({ component }, config.logLevel),
  };
}
