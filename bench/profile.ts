/**
 * A CPU profile of one measured window of a bench (node:inspector, in this process), written to the
 * cwd as `<label>-<time>.cpuprofile` (open it in Chrome DevTools or any .cpuprofile viewer).
 * Returns the function that stops the profiler and writes the file.
 */
export async function startProfile(label: string): Promise<() => Promise<string>> {
  const { Session } = await import('node:inspector');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) => session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  await post('Profiler.enable');
  await post('Profiler.start');
  return async () => {
    const { profile } = await post('Profiler.stop');
    const file = `${label}-${Date.now()}.cpuprofile`;
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    return file;
  };
}
