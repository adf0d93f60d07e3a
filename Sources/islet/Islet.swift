import Foundation
import IsletApp

/// The `islet` executable: everything lives in IsletApp, so this stays a few lines.
@main
enum Islet {
    static func main() {
        exit(CommandLineTool.main(Array(CommandLine.arguments.dropFirst()), context: .process))
    }
}
