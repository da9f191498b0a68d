import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { ServiceConfig, connectBus, createHttpApp, listen } from '@svc/platform';
import { StandaloneModule } from './standalone.module';

/** Starts the standalone service; returns the app and its base URL (tests use port 0). */
export async function startStandalone(config: ServiceConfig): Promise<{ app: NestFastifyApplication; baseUrl: string }> {
  const app = await createHttpApp(StandaloneModule.forRoot(config), config);
  await connectBus(app, 'standalone', config);
  const baseUrl = await listen(app, config);
  return { app, baseUrl };
}
