import Foundation
import IsletCore
import IsletCrypto
import IsletPostgres
import IsletSQL
import IsletSQLite
import IsletStore

/// Where Islet keeps its data, as `--database` (or `ISLET_DATABASE`) names it: a PostgreSQL URL
/// (`postgresql://…` or `postgres://…`) or else the path of an SQLite file.
public enum StorageLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgresql(url: String)

    public init(_ setting: String) {
        self = PostgresDatabase.isURL(setting) ? .postgresql(url: setting) : .sqlite(path: setting)
    }

    /// Safe to print and log: a URL's password is replaced by `***`.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgresql(let url): PostgresDatabase.redacted(url)
        }
    }

    /// Every call crosses the network (PostgreSQL), so the server runs reads on workers too.
    public var isNetworked: Bool {
        if case .postgresql = self { return true }
        return false
    }

    /// Where this machine's own files go (the simulator's certificate, the audit log): beside an SQLite
    /// file, or for PostgreSQL the folder the default SQLite file would be in.
    public var localDirectory: String {
        switch self {
        case .sqlite(let path): URL(fileURLWithPath: path).deletingLastPathComponent().path
        case .postgresql: URL(fileURLWithPath: ServerConfiguration.defaultDatabase).deletingLastPathComponent().path
        }
    }
}

/// An opened database of either engine, and the stores over it.
public struct Storage: Sendable {
    public let location: StorageLocation
    public let database: any SQLDatabase

    /// Who uses the database: a server keeps a pool of connections; a command needs one at a time.
    public enum Purpose: Sendable { case server, command }

    /// Opens (creating an SQLite file if needed) and migrates the database. `node`: the server node it is opened
    /// for, named in its PostgreSQL sessions' `application_name` ("islet node-2").
    public init(_ location: StorageLocation, for purpose: Purpose = .server, node: NodeID? = nil) throws(StoreError) {
        self.location = location
        switch (location, purpose) {
        case (.sqlite(let path), .server): database = try SQLiteDatabase(path: path)
        case (.sqlite(let path), .command): database = try SQLiteDatabase(path: path, maximumIdleConnections: 1)
        case (.postgresql(let url), .server): database = try PostgresDatabase(url: url, name: node.map { "islet \($0.rawValue)" } ?? "islet")
        case (.postgresql(let url), .command): database = try PostgresDatabase(url: url, maximumIdleConnections: 1, maximumConnections: 4)
        }
    }

    public func applications(masterKey: MasterKey?) -> SQLApplicationStore { SQLApplicationStore(database: database, masterKey: masterKey) }
    public var devices: SQLDeviceStore { SQLDeviceStore(database: database) }
    /// The device store with the server's limit on tag names.
    public func devices(tagNames: TagNames) -> SQLDeviceStore { SQLDeviceStore(database: database, tagNames: tagNames) }
    public var messages: SQLMessageStore { SQLMessageStore(database: database) }
    public var schemas: SQLSchemaStore { SQLSchemaStore(database: database) }
    public var simulated: SQLSimulatorStore { SQLSimulatorStore(database: database) }
    public var channels: SQLChannelStore { SQLChannelStore(database: database) }
    public var broadcasts: SQLBroadcastStore { SQLBroadcastStore(database: database) }
    public var cluster: SQLClusterStore { SQLClusterStore(database: database) }
    /// The cluster store whose shared provider tokens are sealed with `masterKey` (when given).
    public func cluster(masterKey: MasterKey?) -> SQLClusterStore { SQLClusterStore(database: database, masterKey: masterKey) }
    public var console: SQLConsoleStore { SQLConsoleStore(database: database) }

    /// Opens a node's liveness session, given its number: PostgreSQL only (SQLite has one server per file).
    /// `sole`: the node must run alone (`--apns simulator`), and no other may join it.
    public func nodeSession(sole: Bool) -> (@Sendable (Int) throws -> any NodeSession)? {
        guard case .postgresql(let url) = location else { return nil }
        return { number in try PostgresNodeSession(url: url, number: number, sole: sole) }
    }

    /// The schema version of the database as it is, without migrating it (`islet db version`).
    public static func schemaVersion(of location: StorageLocation) throws(StoreError) -> Int {
        switch location {
        case .sqlite(let path): try SQLiteDatabase(existingAt: path).schemaVersion()
        case .postgresql(let url): try PostgresDatabase(url: url, migrate: false).schemaVersion()
        }
    }
}
