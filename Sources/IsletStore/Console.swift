import Foundation
import IsletCore

/// A signed-in console session (issue 17). Only the SHA-256 of its id is stored: the id itself is the cookie.
public struct ConsoleSession: Sendable, Equatable {
    public let idHash: [UInt8]
    /// The application the credential allows; nil for the console password, which allows every application.
    public let application: ApplicationCode?
    /// The server API token it was opened with (nil for the console password): revoking the token ends the session.
    public let tokenID: String?
    /// Sent back on every state-changing call (header X-CSRF-Token); a page of another site cannot read it.
    public let csrfToken: String
    public let createdAt: Date
    public let expiresAt: Date

    public init(idHash: [UInt8], application: ApplicationCode?, tokenID: String?, csrfToken: String, createdAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.application = application
        self.tokenID = tokenID
        self.csrfToken = csrfToken
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// One activity in the console's list.
public struct ActivitySummary: Sendable, Equatable {
    public let id: Int64
    public let activityID: String
    public let state: ActivityState
    public let attributesType: String?
    public let name: String?
    public let updatedAt: Date
    /// Devices it runs on, counted up to `ConsoleOverview.deviceCountCap` (a list page stays cheap).
    public let deviceCount: Int

    public init(id: Int64, activityID: String, state: ActivityState, attributesType: String?, name: String?, updatedAt: Date, deviceCount: Int) {
        self.id = id
        self.activityID = activityID
        self.state = state
        self.attributesType = attributesType
        self.name = name
        self.updatedAt = updatedAt
        self.deviceCount = deviceCount
    }
}

/// One message of an activity's timeline (its counts come from getMessageDetails: a fan-out's would cost a scan).
public struct MessageSummary: Sendable, Equatable {
    public let id: Int64
    public let code: String
    public let event: LiveActivityEvent
    public let state: MessageState
    public let createdAt: Date
    public let dueAt: Date
    public let finishedAt: Date?
    /// The push's JSON as planned (`aps` with the content-state, stale and dismissal dates, alert).
    public let payload: [UInt8]
    /// The FCM `data` of its Android Live Update (issue 46); nil when it has none.
    public var androidPayload: [UInt8]?

    public init(id: Int64, code: String, event: LiveActivityEvent, state: MessageState, createdAt: Date, dueAt: Date, finishedAt: Date?,
                payload: [UInt8]) {
        self.id = id
        self.code = code
        self.event = event
        self.state = state
        self.createdAt = createdAt
        self.dueAt = dueAt
        self.finishedAt = finishedAt
        self.payload = payload
    }
}

/// One device in the console's device search.
public struct DeviceSummary: Sendable, Equatable {
    public let id: Int64
    public let hwid: String
    public let userID: String?
    public let osVersion: String?
    public let hasPushToken: Bool
    public let sandbox: Bool
    public let updatedAt: Date

    public init(id: Int64, hwid: String, userID: String?, osVersion: String?, hasPushToken: Bool, sandbox: Bool, updatedAt: Date) {
        self.id = id
        self.hwid = hwid
        self.userID = userID
        self.osVersion = osVersion
        self.hasPushToken = hasPushToken
        self.sandbox = sandbox
        self.updatedAt = updatedAt
    }
}

/// Pushes of one minute, by outcome: delivery state, and APNs reason when there is one.
public struct PushMinute: Sendable, Equatable {
    /// Seconds since 1970 of the minute's start.
    public let minute: Int64
    public let state: DeliveryState
    public let reason: String?
    public let count: Int

    public init(minute: Int64, state: DeliveryState, reason: String?, count: Int) {
        self.minute = minute
        self.state = state
        self.reason = reason
        self.count = count
    }
}

/// The console's overview of one application.
public struct ConsoleOverview: Sendable, Equatable {
    public var devices = 0
    public var pushToStartTokens = 0
    public var activities: [ActivityState: Int] = [:]
    /// Pushes recorded since the overview's start time, a minute at a time.
    public var pushes: [PushMinute] = []

    /// Where counting an activity's devices for a list stops (a page of the list refreshes on every change).
    public static let deviceCountCap = 1_000

    public init() {}
}

/// What the console reads besides the API's own methods, and its sessions.
public protocol ConsoleStore: Sendable {
    func createConsoleSession(_ session: ConsoleSession) throws(StoreError)
    /// The session with this id hash, if it exists and has not expired at `date`.
    func consoleSession(idHash: [UInt8], at date: Date) throws(StoreError) -> ConsoleSession?
    func deleteConsoleSession(idHash: [UInt8]) throws(StoreError)
    /// Removes sessions expired before `date`; returns how many.
    @discardableResult
    func deleteExpiredConsoleSessions(before date: Date) throws(StoreError) -> Int

    /// The console password's stored hash (PBKDF2 record), if one was set.
    func consolePassword() throws(StoreError) -> String?
    func setConsolePassword(_ record: String, at date: Date) throws(StoreError)

    func consoleOverview(of application: ApplicationCode, pushesSince: Date) throws(StoreError) -> ConsoleOverview
    /// Newest first; `before` is an activity row id (the paging cursor), 0 for the first page.
    func activities(in application: ApplicationCode, state: ActivityState?, attributesType: String?, before: Int64,
                    limit: Int) throws(StoreError) -> [ActivitySummary]
    /// An activity's messages, newest first, `before` a message row id (0 for the first page).
    func messages(ofActivity activity: Int64, before: Int64, limit: Int) throws(StoreError) -> [MessageSummary]
    /// Devices whose HWID starts with `prefix` (every device when empty), in HWID order after the HWID `after`.
    func devices(in application: ApplicationCode, hwidPrefix prefix: String, after: String, limit: Int) throws(StoreError) -> [DeviceSummary]
    /// Devices whose User ID is `userID`, in HWID order.
    func devices(in application: ApplicationCode, userID: String, limit: Int) throws(StoreError) -> [DeviceSummary]
    /// What changed: the messages (id and application) with an id above `afterMessage`, and which of those and of
    /// `open` (messages seen unfinished; nil: the newest of those unfinished now) have finished.
    func consoleChanges(afterMessage: Int64, open: [Int64]?) throws(StoreError) -> ConsoleChanges
    /// The highest message id (0 without messages).
    func lastMessageID() throws(StoreError) -> Int64
}

/// New messages and newly finished ones (id and application), and those still unfinished (to ask about next time),
/// for the console's change events.
public struct ConsoleChanges: Sendable {
    public var created: [(id: Int64, application: ApplicationCode)]
    public var finished: [(id: Int64, application: ApplicationCode)]
    public var open: [Int64]

    public init(created: [(id: Int64, application: ApplicationCode)], finished: [(id: Int64, application: ApplicationCode)], open: [Int64]) {
        self.created = created
        self.finished = finished
        self.open = open
    }
}
