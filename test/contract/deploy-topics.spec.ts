import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Patterns, Topics } from '@svc/messaging';

const root = join(__dirname, '..', '..');
const files = ['docker-compose.yml', 'deploy/k8s/kafka-topics-job.yaml', 'deploy/topics.md'];

/** The Kafka topic lists of the deployment files follow libs/messaging/src/names.ts. */
describe('deployment topic lists', () => {
  for (const file of files) {
    it(`${file} creates every topic and request pattern`, () => {
      const text = readFileSync(join(root, file), 'utf8');
      for (const name of [...Object.values(Topics), ...Object.values(Patterns)]) {
        expect({ name, present: text.includes(name) }).toEqual({ name, present: true });
      }
    });
  }
});
