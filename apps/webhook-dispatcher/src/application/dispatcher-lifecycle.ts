import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AttemptRunner } from './attempt-runner';
import { AttemptSlots } from './attempt-slots';
import { RetryWorker } from './retry-worker';

/**
 * Starts the retry worker once the application is up, and stops the webhook work in order when it
 * shuts down: new dispatches and releases are refused (the relay redelivers them after a restart)
 * and releases waiting for a slot stop waiting; the retry worker stops and its attempts end; the
 * direct first attempts end; then the sender thread closes.
 */
@Injectable()
export class DispatcherLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  constructor(
    private readonly slots: AttemptSlots,
    private readonly worker: RetryWorker,
    private readonly attempts: AttemptRunner,
  ) {}

  onApplicationBootstrap(): void {
    this.worker.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.slots.stop();
    await this.worker.stop();
    await this.slots.drain();
    await this.attempts.close();
  }
}
