import type { Money } from "../money.js";

/**
 * The bound of every settlement (a balance never goes negative): a hold may
 * be charged at most what it holds plus what is still available
 * (balance − reserved, this hold included in reserved). Whatever was asked
 * beyond that is not charged; it is the shortfall, recorded for the operator.
 */
export function boundedCharge(
  asked: Money, hold: Money, account: { readonly balance: Money; readonly reserved: Money },
): { charged: Money; shortfall: Money } {
  const room = hold + account.balance - account.reserved;
  const ceiling = room > 0n ? room : 0n;
  const charged = asked <= ceiling ? asked : ceiling;
  return { charged, shortfall: asked - charged };
}

/** Whether a reservation id counts against a ReserveOptions.maxOpenHolds limit. */
export function countsAsOpenHold(reservationId: string, countedPrefix: string, exceptPrefix?: string): boolean {
  return reservationId.startsWith(countedPrefix) && !(exceptPrefix !== undefined && reservationId.startsWith(exceptPrefix));
}
