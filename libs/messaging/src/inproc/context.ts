import { BaseRpcContext } from '@nestjs/microservices';
import { BusHeaders } from './broker';

type InProcessContextArgs = [pattern: string, key: string | null, headers: BusHeaders];

/** The `@Ctx()` of handlers on the in-process transport (mirrors what KafkaContext offers). */
export class InProcessContext extends BaseRpcContext<InProcessContextArgs> {
  constructor(args: InProcessContextArgs) {
    super(args);
  }

  /** The pattern (topic) the message arrived on. */
  getPattern(): string {
    return this.args[0];
  }

  /** The partition key the sender gave (the stream id for integration events), or null. */
  getKey(): string | null {
    return this.args[1];
  }

  /** Transport headers (event metadata for integration events). */
  getHeaders(): BusHeaders {
    return this.args[2];
  }
}
