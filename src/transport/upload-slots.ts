/** Gives a taken slot back; calling it more than once gives it back once. */
export type ReleaseSlot = () => void;

/** What one body holds of a BodyBudget: `take` answers false (nothing taken) when bytes do not fit, true once released. */
export interface BodyHold {
  take(bytes: number): boolean;
  /** Gives back everything taken, once. */
  release(): void;
}

/** Units held at once by the process, both ports together, up to `capacity`. */
class Capacity {
  private used = 0;

  constructor(readonly capacity: number, what: string) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new Error(`${what}: capacity must be an integer ≥ 1 (got ${capacity})`);
  }

  get inUse(): number {
    return this.used;
  }

  /** A hold that takes units as they come (a chunked body's pieces) and gives them all back at once. */
  open(): BodyHold {
    let held = 0;
    let released = false;
    return {
      take: (units) => {
        if (released) return true;
        if (units > this.capacity - this.used) return false;
        this.used += units;
        held += units;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.used -= held;
      },
    };
  }
}

/** Large uploads read at once (a body of hundreds of MiB is held while parsed); a full house refuses (429), since a queue would hold the sockets anyway. */
export class UploadSlots extends Capacity {
  constructor(capacity: number) {
    super(capacity, "upload slots");
  }

  tryTake(): ReleaseSlot | undefined {
    const hold = this.open();
    return hold.take(1) ? hold.release : undefined;
  }
}

/** MAX_BODY_MEMORY: bytes of bodies being received at once, small ones too, so stalled senders cannot add up beyond it. */
export class BodyBudget extends Capacity {
  constructor(capacity: number) {
    super(capacity, "body budget");
  }
}
