/** What the few migrations that rewrite data need from the running server. */
export interface MigrationContext {
  /** Encrypts a secret for storage (lib/secret-box.ts). */
  seal(plain: string): string;
  /**
   * Told by a migration that replaced secrets in place: once migrations have committed, storage purges the old
   * values' bytes from the table's free space (storage/db.ts).
   */
  replacedSecrets(table: string): void;
}
