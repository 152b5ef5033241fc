import { statSync, type BigIntStats } from "node:fs";
import { DependencyUnavailableError } from "../../ports/dependency.js";
import { SQLITE_DEPENDENCY } from "./sqlite-errors.js";

interface Opened {
  readonly path: string;
  readonly dev: bigint;
  readonly ino: bigint;
}

/**
 * Whether the paths of the open database (the file and its WAL) still name
 * the files this process writes. A deleted (or replaced) file stays writable
 * through the open descriptors, so SQLite goes on committing into an inode
 * that nothing names any more: every write from then on is lost at the next
 * restart, in silence. Node cannot fstat the driver's descriptors, so the
 * identity (device and inode) is recorded at open and `stat(path)` compared
 * with it.
 *
 * Once a path names another file, or none, the loss is for good (a deleted
 * inode cannot be named again): `verify` throws DependencyUnavailableError
 * from then on without asking the filesystem, and `onLost` is told once.
 */
export class FileIdentity {
  private lost: DependencyUnavailableError | undefined;

  private constructor(
    private readonly files: readonly Opened[],
    private readonly onLost: (error: DependencyUnavailableError) => void,
  ) {}

  /** Records what each existing path names now; a path that does not exist is not watched. */
  static record(paths: readonly string[], onLost: (error: DependencyUnavailableError) => void): FileIdentity {
    const files: Opened[] = [];
    for (const path of paths) {
      const stats = statSync(path, { bigint: true, throwIfNoEntry: false });
      if (stats) files.push({ path, dev: stats.dev, ino: stats.ino });
    }
    return new FileIdentity(files, onLost);
  }

  /** True once a path was found naming another file or none. */
  get isLost(): boolean {
    return this.lost !== undefined;
  }

  /**
   * Throws DependencyUnavailableError when a path no longer names the file
   * opened there (for good), or cannot be looked at now (for this call).
   * Two stat calls: cheap enough for each group commit and each flush.
   */
  verify(): void {
    if (this.lost) throw this.lost;
    for (const file of this.files) {
      let now: BigIntStats | undefined;
      try {
        now = statSync(file.path, { bigint: true, throwIfNoEntry: false });
      } catch (error) {
        // EACCES, EIO: the file may be fine; this call cannot tell, so it refuses without deciding for good.
        throw new DependencyUnavailableError(SQLITE_DEPENDENCY, `cannot look at ${file.path}: ${(error as Error).message}`, { cause: error });
      }
      if (now && now.dev === file.dev && now.ino === file.ino) continue;
      this.lost = new DependencyUnavailableError(
        SQLITE_DEPENDENCY,
        `${file.path} ${now ? "was replaced by another file" : "was deleted"} while the service had it open: ` +
          "what it writes now would be lost at the next restart, so it writes nothing more; restart it (writes since the deletion are gone)",
      );
      this.onLost(this.lost);
      throw this.lost;
    }
  }
}
