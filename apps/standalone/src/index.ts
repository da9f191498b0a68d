/** The app's public surface (@apps/standalone): the standalone stack started in-process, for libs/testing. */
export { startStandalone } from './app';
export { StandaloneModule } from './standalone.module';
