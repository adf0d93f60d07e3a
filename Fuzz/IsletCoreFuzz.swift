// libFuzzer target for IsletCore's input handling: the JSON parser, the field reader and every request
// rule built on them (Live Activity notifications, filters, schemas). Built by `make fuzz` with
// `swiftc -sanitize=fuzzer,address` from IsletCore's sources; not part of the SwiftPM package.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let document = try? JSONParser.parse(bytes) else { return 0 }
    // What parses must write back to text that parses to the same text.
    let text = document.jsonText
    guard let again = try? JSONParser.parse(text), again.jsonText == text else { fatalError("round trip changed \(text)") }
    guard let reader = try? FieldReader(document, path: "request") else { return 0 }
    let now = Date(timeIntervalSince1970: 1_796_000_000)
    if let notifications = try? LiveActivityRequests.notifications(reader) {
        _ = try? LiveActivityRequests.dryRun(reader, notifications)
        for n in notifications {
            if let start = try? LiveActivityRequests.start(n, now: now) {
                _ = try? LiveActivityPayload.checkSize(LiveActivityPayload.start(start, timestamp: 1).jsonBytes, path: n.path)
            }
            if let update = try? LiveActivityRequests.update(n) {
                _ = LiveActivityPayload.update(update, timestamp: 1).jsonBytes
            }
        }
    }
    _ = try? FilterDefinition.parse(name: "F", join: .and, conditions: reader.value("conditions"),
                                    tagTypes: ["Level": .integer, "City": .string, "Sports": .list])
    if let state = reader.value("content_state") {
        _ = try? LiveActivitySchema.parseFields(state, path: "content_state")
    }
    return 0
}
