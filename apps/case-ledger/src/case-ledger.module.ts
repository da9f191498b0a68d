import { Module } from '@nestjs/common';

/** The case-ledger bounded context. */
@Module({})
export class CaseLedgerModule {}
