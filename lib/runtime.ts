import type { Config } from './config.js';
import { createDb, type Db } from './db.js';
import { LocalFileStorage, type FileStorage } from './storage.js';
import { VectorIndex } from './providers/vector-index.js';
import { embedderFromConfig, type EmbeddingProvider } from './providers/embeddings.js';
import { OpenAiVectorStore, type VendorVectorStore } from './providers/vector-store.js';
import { createLogger, type Logger } from './logger.js';
import { OpenAiChatModel, type ChatModel } from './providers/llm.js';
import { YouTubeTranscripts, type VideoTranscriptSource } from './providers/video-transcripts.js';
import { Scraper } from './providers/scraper.js';

/** The long-lived clients a process (API or worker) shares, built once from the configuration. */
export interface Services {
  config: Config;
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  /** Vendor sync's external vector store; null when no vector-store API is configured. */
  vendorStore: VendorVectorStore | null;
  log: Logger;
  /** The OpenAI-compatible model API (OPENAI_BASE_URL); null when none is configured. */
  chatModel: ChatModel | null;
  /** Transcripts of video URL documents (VIDEO_PLATFORM_BASE_URL). */
  videoTranscripts: VideoTranscriptSource;
  /** The scraping provider for URL documents (SCRAPER_BASE_URL); null fetches pages directly. */
  scraper: Scraper | null;
}

export function createServices(config: Config, component: string): Services {
  return {
    config,
    db: createDb(config.databaseUrl),
    storage: new LocalFileStorage(config.storageDir),
    index: new VectorIndex(config.weaviateUrl),
    embedder: embedderFromConfig(config),
    vendorStore: config.vendorSync ? new OpenAiVectorStore(config.vendorSync) : null,
    log: createLogger({ component }, config.logLevel),
    videoTranscripts: new YouTubeTranscripts({ baseUrl: config.videoPlatformBaseUrl }),
    scraper: config.scraper ? new Scraper(config.scraper) : null,
    chatModel: config.openaiBaseUrl ? new OpenAiChatModel({ baseURL: config.openaiBaseUrl, apiKey: config.openaiApiKey }) : null,
  };
}
