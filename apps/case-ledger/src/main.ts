import 'reflect-metadata';
import { runService } from '@svc/platform';
import { CaseLedgerModule } from './case-ledger.module';

void runService('case-ledger', [CaseLedgerModule]);
