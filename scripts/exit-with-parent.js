/**
 * Preloaded into each app by scripts/start-distributed.js (`node --require`): the app ends when
 * the script that started it is gone, however it went (SIGKILL included), so that no app is left
 * running without it. The script holds an IPC channel to each app; when the channel closes, the
 * app gets SIGTERM (its shutdown hooks run) and, should those hang, exits 10 s later.
 */
'use strict';
if (typeof process.send === 'function' && process.channel) {
  // The channel must not keep the app alive by itself.
  process.channel.unref();
  process.once('disconnect', () => {
    setTimeout(() => process.exit(1), 10_000).unref();
    process.kill(process.pid, 'SIGTERM');
  });
}
