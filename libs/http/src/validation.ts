import { ValidationPipe } from '@nestjs/common';
import { ApiError, flattenValidationErrors } from './errors';

/** Validation at the edge (architecture rule 10): unknown fields are refused, not stripped. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => ApiError.validation(flattenValidationErrors(errors)),
  });
}
