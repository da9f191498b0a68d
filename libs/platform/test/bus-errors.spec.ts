import { Controller, Module } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import { DomainError } from '@svc/eventstore';
import { InProcessBroker, InProcessClient } from '@svc/messaging';
import { connectBus, createHttpApp, IN_PROCESS_BROKER, loadConfig } from '@svc/platform';

@Controller()
class RefusingController {
  @MessagePattern('test.refuse')
  refuse(): never {
    throw new DomainError(409, 'OUT_OF_ORDER', 'refused');
  }

  @MessagePattern('test.crash')
  crash(): never {
    throw new Error('secret detail that must not cross');
  }
}

const broker = new InProcessBroker();

@Module({ controllers: [RefusingController], providers: [{ provide: IN_PROCESS_BROKER, useValue: broker }] })
class TestModule {}

/** A domain refusal thrown by a bus handler of the hybrid HTTP app reaches the caller with status and code. */
describe('bus errors in the hybrid app', () => {
  it('carries DomainError status and code, and hides unexpected errors', async () => {
    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', SVC_DATA_DIR: '/tmp/unused' });
    const app = await createHttpApp(TestModule, config);
    await connectBus(app, 'test', config);
    await app.init();
    const client = new InProcessClient(broker);
    await client.connect();
    await expect(lastValueFrom(client.send('test.refuse', {}))).rejects.toMatchObject({ status: 409, code: 'OUT_OF_ORDER' });
    const crash = await lastValueFrom(client.send('test.crash', {})).catch((e) => e);
    expect(crash).toMatchObject({ status: 500 });
    expect(JSON.stringify(crash)).not.toContain('secret detail');
    await client.close();
    await app.close();
  });
});
