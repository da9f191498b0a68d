import 'reflect-metadata';
import { getLogger } from '@svc/http';
import { PRIVATE_UMASK, exitOnCrash, loadConfig } from '@svc/platform';
import { startStandalone } from './app';

async function main(): Promise<void> {
  // Before anything is written: whatever is created without a mode of its own is owner-only (docs/decisions.md, "Deployment safety").
  process.umask(PRIVATE_UMASK);
  exitOnCrash();
  const config = loadConfig();
  const { baseUrl } = await startStandalone(config);
  getLogger().info({ dataDir: config.dataDir }, 'standalone service started');
  process.stdout.write(`Patient-care integration service (standalone) listening at ${baseUrl}\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`failed to start: ${err.name}: ${err.message}\n`);
  process.exit(1);
});
