/**
 * The promise's outcome, or the error `late()` makes once `timeoutMs` has passed without one. For
 * clients that take no abort signal: the work goes on and its late outcome is dropped (never an
 * unhandled rejection), so the caller must be able to let it finish unobserved.
 */
export function answeredWithin<T>(work: Promise<T>, timeoutMs: number, late: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), timeoutMs);
  });
  work.catch(() => undefined);
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
