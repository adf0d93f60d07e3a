import Foundation
import IsletCore
import IsletStore

/// A device's own receipts of its pushes (issue 45), kept on the push's delivery record.
extension SQLMessageStore: DeviceReceipts {
    public func recordReceipt(_ receipt: SDKCalls.Receipt, messageCode code: String, hwid: String, in application: ApplicationCode,
                              at date: Date) throws(StoreError) -> Bool {
        let column = Self.column(of: receipt)
        let app = SQLValue.text(application.rawValue)
        // The first report is kept: the SDK sends a receipt again when it was not answered.
        return try database.write { (c) throws(StoreError) -> Bool in
            try c.run("""
                UPDATE deliveries SET \(column) = COALESCE(\(column), ?)
                WHERE message = (SELECT id FROM messages WHERE code = ? AND application = ?)
                  AND device = (SELECT id FROM devices WHERE application = ? AND hwid = ?)
                  AND state IN \(Self.wentOut.sqlList)
                """, [SQLValue.seconds(date), .text(code), app, app, .text(hwid)]) == 1
        }
    }

    /// The states of a push that may have reached the phone: sent, sent without an answer, or on the wire now.
    static let wentOut: [DeliveryState] = [.sent, .unconfirmed, .sending]

    /// The column of `deliveries` a receipt is kept in.
    static func column(of receipt: SDKCalls.Receipt) -> String {
        switch receipt {
        case .received: "received_at"
        case .opened: "opened_at"
        }
    }
}
