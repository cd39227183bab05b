/**
 * Lookups a process has made lately, so that a request does not wait for a lookup that a request a
 * moment ago made already: API keys by their hash (messaging quota keys, MESSAGING_KEY_CACHE_SECONDS;
 * partner keys, PARTNER_KEY_CACHE_SECONDS) and where new documents go (lib/knowledge/document-inserts.ts).
 * An entry is served for at most `cacheSeconds` after the lookup that found it; one in use is looked
 * up again in the background once half of that has passed (the request that notices does not wait),
 * so a busy entry never waits for a lookup and a change made through another replica (a key
 * revoked) shows within that bound. The replica that makes the change forgets the entry at once
 * (`forget`). What was not found is never remembered.
 *
 * A refresh goes out REFRESH_DELAY_MS after the request that noticed it, with the others noticed
 * meanwhile: sent at once, the lookup and its answer fell in the moments the request itself was
 * being served (bench:messaging: a key used every few seconds added ~0.4 ms to its request's time
 * to first token). Half an entry's life is always left for the delay and the lookup.
 */
const REFRESH_DELAY_MS = 50;
interface Entry<P> {
  value: P;
  /** Served until then (ms since the epoch). */
  until: number;
  /** Served as unverified (`findKnown`) until then. */
  knownUntil: number;
  refreshing: boolean;
}

interface DueRefresh<P> {
  entry: Entry<P>;
  cacheSeconds: number;
  lookUp: () => Promise<P | null>;
}

export class RecentLookups<P> {
  private readonly entries = new Map<string, Entry<P>>();
  private readonly due = new Map<string, DueRefresh<P>>();
  private refreshTimer: NodeJS.Timeout | null = null;

  /**
   * `knownSeconds`: how long after the lookup or confirmation that found an entry `findKnown` may
   * still serve it, unverified (0: never past `cacheSeconds`).
   */
  constructor(private readonly options: { maxEntries?: number; knownSeconds?: number } = {}) {}

  /**
   * What `lookUp` finds for `key`: from the cache while its entry is fresh, else from `lookUp`
   * (null: nothing, e.g. an unknown or revoked key). `cacheSeconds` 0 looks up every time and
   * remembers nothing.
   */
  async find(key: string, cacheSeconds: number, lookUp: () => Promise<P | null>): Promise<P | null> {
    const cached = this.entries.get(key);
    const now = Date.now();
    if (cached && cached.until > now) {
      this.refreshIfDue(key, cacheSeconds, lookUp);
      return cached.value;
    }
    const value = await lookUp();
    if (!value) this.entries.delete(key);
    else if (cacheSeconds > 0) this.remember(key, value, cacheSeconds);
    return value;
  }

  /**
   * `find`, for a request whose own work checks again what the entry vouches for (a quota admission
   * in the database re-reads the key's row): an entry found or confirmed within `knownSeconds` is
   * served at once, `verified` while within `cacheSeconds`, and not looked up ahead: the request's
   * check confirms it (`confirm`) or forgets it, or, when it did not check it after all, asks for a
   * refresh (`refreshIfDue`). A key used every minute then costs no lookup. `mayServeUnverified`
   * false: past `cacheSeconds` the entry is looked up, as `find` does.
   */
  async findKnown(key: string, cacheSeconds: number, lookUp: () => Promise<P | null>, mayServeUnverified: (value: P) => boolean = () => true): Promise<{ value: P; verified: boolean } | null> {
    const cached = this.entries.get(key);
    const now = Date.now();
    if (cached && cached.until > now) return { value: cached.value, verified: true };
    if (cached && cached.knownUntil > now && mayServeUnverified(cached.value)) return { value: cached.value, verified: false };
    const value = await this.find(key, cacheSeconds, lookUp);
    return value === null ? null : { value, verified: true };
  }

  /** Has an entry past half of its life looked up again soon, in the background (once; `find` does this for the requests it serves). */
  refreshIfDue(key: string, cacheSeconds: number, lookUp: () => Promise<P | null>): void {
    const entry = this.entries.get(key);
    const now = Date.now();
    if (!entry || entry.refreshing || entry.until <= now || entry.until - now >= (cacheSeconds * 1000) / 2) return;
    entry.refreshing = true;
    this.due.set(key, { entry, cacheSeconds, lookUp });
    if (!this.refreshTimer) {
      this.refreshTimer = setTimeout(() => this.refreshDue(), REFRESH_DELAY_MS);
      this.refreshTimer.unref();
    }
  }

  /** The request's own check found the entry's value still holds: it is served verified for `cacheSeconds` again. */
  confirm(key: string, cacheSeconds: number): void {
    const entry = this.entries.get(key);
    if (entry && cacheSeconds > 0) this.remember(key, entry.value, cacheSeconds);
  }

  /** Forgets every entry whose value matches (a key revoked or changed through this replica). */
  forget(matches: (value: P) => boolean): void {
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.entries.delete(key);
  }

  /** Looks up again every entry found due since the last time, together (a batching lookUp shares one round trip). */
  private refreshDue(): void {
    this.refreshTimer = null;
    const due = [...this.due];
    this.due.clear();
    for (const [key, { entry, cacheSeconds, lookUp }] of due) {
      // Forgotten while it waited (a key revoked here): its answer would be dropped anyway.
      if (this.entries.get(key) !== entry) continue;
      lookUp().then(
        (value) => {
          // Unless the entry went meanwhile (forgotten here): a lookup begun before can be stale.
          if (this.entries.get(key) !== entry) return;
          if (value) this.remember(key, value, cacheSeconds);
          else this.entries.delete(key);
        },
        () => (entry.refreshing = false), // served until its time is up; the next request tries again
      );
    }
  }

  private remember(key: string, value: P, cacheSeconds: number) {
    if (!this.entries.has(key) && this.entries.size >= (this.options.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value!);
    const now = Date.now();
    this.entries.set(key, { value, until: now + cacheSeconds * 1000, knownUntil: now + Math.max(cacheSeconds, this.options.knownSeconds ?? 0) * 1000, refreshing: false });
  }
}
