/**
 * Runs `work` beside a 10 ms timer and says how often the timer fired meanwhile: work that holds
 * the event loop from start to end lets it fire not once, however long it takes.
 */
export async function timerTicksDuring<T>(work: () => Promise<T>): Promise<{ result: T; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    const result = await work();
    return { result, ticks };
  } finally {
    clearInterval(timer);
  }
}
