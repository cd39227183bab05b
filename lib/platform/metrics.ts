import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { answeredWithin } from './deadline.js';

/**
 * Prometheus metrics of one API process (docs/operations.md, "Metrics"): the HTTP instruments,
 * the process's own metrics, and gauges computed at scrape time from sources (Postgres, Temporal).
 *
 * A source is read at most once per `cacheSeconds` however many scrapes arrive (concurrent scrapes
 * share one reading), and a reading that takes longer than `timeoutMs` fails: a scrape storm cannot
 * hammer Postgres or Temporal, and a slow or unreachable one cannot hold a scrape. A failed source
 * leaves its gauges out of the answer and shows `dwb_metrics_source_up{source} 0`; everything else
 * is still answered.
 */
export interface MetricsOptions {
  cacheSeconds: number;
  /** Bound on one reading of a source. */
  timeoutMs?: number;
  /** Called when a source fails (its error is logged, not shown in the exposition). */
  onSourceError?(source: string, err: unknown): void;
}

export interface HttpRequestLabels {
  method: string;
  /** The route template (e.g. `/api/documents/{partner}/{kb}`), never the raw path. */
  route: string;
  status: string;
}

type Read<T> = () => Promise<T>;

/** A reading shared by every caller until `ttlMs` after it settled; one that is in flight is shared too. */
export function cachedReading<T>(read: Read<T>, ttlMs: number, timeoutMs: number): Read<T> {
  let current: { promise: Promise<T>; settledAt: number | null } | null = null;
  return () => {
    if (current && (current.settledAt === null || Date.now() - current.settledAt < ttlMs)) return current.promise;
    const entry: { promise: Promise<T>; settledAt: number | null } = { promise: withTimeout(read, timeoutMs), settledAt: null };
    const settle = () => void (entry.settledAt = Date.now());
    entry.promise.then(settle, settle);
    current = entry;
    return entry.promise;
  };
}

const withTimeout = <T>(read: Read<T>, timeoutMs: number): Promise<T> => answeredWithin(Promise.resolve().then(read), timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));

/** Request latency buckets (seconds): from a health check to a long upload or a streamed answer. */
const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'status'>;
  private readonly sources = new Map<string, Read<unknown>>();

  constructor(private readonly options: MetricsOptions) {
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'dwb_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status code',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.duration = new Histogram({
      name: 'dwb_http_request_duration_seconds',
      help: 'Time from a request arriving to its answer being sent, by method, route template and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: latencyBuckets,
      registers: [this.registry],
    });
    const sources = this.sources;
    const onError = options.onSourceError;
    new Gauge({
      name: 'dwb_metrics_source_up',
      help: 'Whether the last reading of a source of scrape-time gauges (postgres, temporal) succeeded',
      labelNames: ['source'],
      registers: [this.registry],
      async collect() {
        this.reset();
        await Promise.all(
          [...sources].map(async ([name, read]) => {
            const up = await read().then(
              () => 1,
              (err: unknown) => (onError?.(name, err), 0),
            );
            this.set({ source: name }, up);
          }),
        );
      },
    });
  }

  observeRequest(labels: HttpRequestLabels, seconds: number): void {
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }

  /** Declares a source of scrape-time gauges; its reading is cached as MetricsOptions say. */
  source<T>(name: string, read: Read<T>): Read<T> {
    const cached = cachedReading(read, this.options.cacheSeconds * 1000, this.options.timeoutMs ?? 5000);
    this.sources.set(name, cached);
    return cached;
  }

  /**
   * A gauge set at scrape time from a source's reading. Its label sets are rebuilt from each
   * reading (a value that disappeared is not reported stale). A failed reading leaves a labelled
   * gauge out and shows a gauge without labels as NaN (never a misleading 0).
   */
  gauge<T, L extends string>(def: { name: string; help: string; labelNames?: L[]; from: Read<T>; set(gauge: Gauge<L>, reading: T): void }): void {
    new Gauge<L>({
      name: def.name,
      help: def.help,
      labelNames: def.labelNames ?? [],
      registers: [this.registry],
      async collect() {
        this.reset();
        const reading = await def.from().catch(() => null);
        if (reading !== null) def.set(this, reading);
        else if (!def.labelNames?.length) this.set(NaN);
      },
    });
  }

  /** The text exposition format Prometheus scrapes. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
