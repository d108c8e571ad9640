
Pâ
Pâ2Process
Pâ"*Thread(
@PZHXº
AsyncSlice

@PZHX
@PZHXºProcessSlice

@PZHX
@PZHXºThreadSlice

@PZHX
@PZHXºNestedThreadSlice

@PZHX