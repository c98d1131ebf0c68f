import TextFormats

// RFC 4180 CSV records for order files (the records themselves: ByteInput+CSV.swift).

extension OrderFileReader {
    enum CSVRecord {
        case fields([[UInt8]], line: Int)
        case error(OrderFileError)
    }

    /// The next record (blank lines skipped), or nil at the end of the input.
    mutating func readCSVRecord() -> CSVRecord? {
        switch input.readCSVRecord(maxFieldBytes: OrderFile.maxFieldBytes, maxFields: OrderFile.maxFields) {
        case nil: return nil
        case let .fields(fields, line)?: return .fields(fields, line: line)
        case let .error(line, reason)?: return .error(OrderFileError(line: line, field: "", reason: reason))
        }
    }

    /// Reads the header row: column names (nil for one read past), or every problem with them (then the file is not
    /// read further).
    mutating func readHeader() -> Result<[String?], OrderFileRejection> {
        guard let record = readCSVRecord() else { return .failure(OrderFileRejection(errors: [])) }
        let names: [[UInt8]]
        let line: Int
        switch record {
        case let .error(error): return .failure(OrderFileRejection(errors: [error]))
        case let .fields(fields, at): (names, line) = (fields, at)
        }
        var errors: [OrderFileError] = []
        var columns: [String?] = []
        for raw in names {
            guard let text = String(validating: raw, as: UTF8.self) else {
                errors.append(OrderFileError(line: line, field: "", reason: "column name is not valid UTF-8"))
                columns.append("")
                continue
            }
            let name = String(text.trimmingASCIIBlanks()).lowercased()
            if name.isEmpty {
                errors.append(OrderFileError(line: line, field: "", reason: "empty column name"))
            } else if !OrderFile.knownFields.contains(name) {
                if readPast(name) { columns.append(nil); continue }
                let known = (OrderFile.requiredFields + OrderFile.optionalFields).joined(separator: ", ")
                let miss = Self.nearMiss(name).map { "; did you mean \($0)?" } ?? ""
                errors.append(OrderFileError(line: line, field: text, reason: "unknown column\(miss) (known: \(known))"))
            } else if columns.contains(name) {
                errors.append(OrderFileError(line: line, field: name, reason: "repeated column"))
            }
            columns.append(name)
        }
        for required in OrderFile.requiredFields where !columns.contains(required) {
            errors.append(OrderFileError(line: line, field: required, reason: "missing column"))
        }
        return errors.isEmpty ? .success(columns) : .failure(OrderFileRejection(errors: errors))
    }

    mutating func nextCSVRow(columns: [String?]) -> OrderFileRecord? {
        guard let record = readCSVRecord() else { return nil }
        switch record {
        case let .error(error):
            return .invalid([error])
        case let .fields(fields, line):
            guard fields.count == columns.count else {
                return .invalid([
                    OrderFileError(
                        line: line, field: "",
                        reason: "expected \(columns.count) fields, found \(fields.count)")
                ])
            }
            var values: [String: RawValue] = [:]
            var errors: [OrderFileError] = []
            for (column, raw) in zip(columns, fields) {
                guard let column else { continue }
                guard let text = String(validating: raw, as: UTF8.self) else {
                    errors.append(OrderFileError(line: line, field: column, reason: "not valid UTF-8"))
                    continue
                }
                values[column] = .text(text)
            }
            guard errors.isEmpty else { return .invalid(errors) }
            return validator.validate(line: line, values: values)
        }
    }
}

extension StringProtocol {
    func trimmingASCIIBlanks() -> SubSequence {
        let isBlank = { (character: Character) in character == " " || character == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
