
â
â2Process
â"*Thread(
@ZHXº
AsyncSlice
@ZHX
@ZHXºProcessSlice
@ZHX
@ZHXºThreadSlice
@ZHX
@ZHXºNestedThreadSlice
@ZHX