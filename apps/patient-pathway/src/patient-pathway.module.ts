import { Module } from '@nestjs/common';

/** The patient-pathway bounded context. */
@Module({})
export class PatientPathwayModule {}
