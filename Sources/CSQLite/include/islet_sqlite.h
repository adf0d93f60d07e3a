#ifndef ISLET_SQLITE_H
#define ISLET_SQLITE_H
#include <sqlite3.h>

/// sqlite3_bind_text/blob with SQLITE_TRANSIENT, a macro Swift cannot import.
int islet_sqlite3_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length);
int islet_sqlite3_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length);

/// sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, bytes), a variadic call Swift cannot make; before any
/// connection opens (SQLITE_MISUSE after).
int islet_sqlite3_config_statement_journal_spill(int bytes);

#endif
